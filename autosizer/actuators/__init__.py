"""Actuators apply a decision to the running job; registered by name under `autosizer.actuators`."""
