"""Drivers for the real ASTRA-sim binaries: locate, build the command, run (native or Docker), parse."""
