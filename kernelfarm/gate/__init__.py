"""The CI gate behind ``kernelfarm ci`` (docs/CI.md): config file, measuring, verdicts, reports."""
