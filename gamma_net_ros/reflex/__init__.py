"""The reflex node: a command filter between the operator and the motors that acts on predictions.

:mod:`.node` the node; :mod:`.forms` the command message forms; :mod:`.settings` its parameters and rules
file; :mod:`.health` its diagnostics and event lines.
"""
