"""The neural predictor node: a neural Γ-net learned online from `Transition` messages.

:mod:`.node` the node; :mod:`.settings` its parameters; :mod:`.health` its diagnostics and log lines.
"""
