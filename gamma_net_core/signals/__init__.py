"""Signals to predict: the square wave, and the simulated arm, maze and operator."""
