"""The model profiler: profile a model's inference per operator, class each operator against the GPU's
roofline, and turn the hot ones into tuning jobs for the farm (``kernelfarm profile-model``).

It is part of the command-line layer: it runs where the user's model runs (a GPU host, or the CPU for
its tests) and talks to the farm only through its REST API, like any client.
"""
