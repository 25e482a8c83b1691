"""The horde node: many questions learned at once from a questions file.

:mod:`.node` the node; :mod:`.settings` its parameters; :mod:`.topics` the sampled input topics;
:mod:`.rows` readings to learner rows and messages; :mod:`.health` its diagnostics.
"""
