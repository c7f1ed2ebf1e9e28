"""kernelfarm: the one import name of the farm. The card's folders install beneath it (kernelfarm.api,
kernelfarm.core, ...); the modules here are the command line, the launcher and the embedded stack."""
