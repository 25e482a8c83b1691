"""Fixed responses driven by predictions: rules as data (``rules``) and their evaluation (``evaluation``).

A rule names a prediction (a Horde question at a timescale, or a readout) or the present
signal, a condition with hysteresis and a minimum hold time, and a response (scale or zero
named joints' velocity commands, or publish an event). Parsing and evaluation are pure: the
``reflex`` node only wires topics to them.
"""
