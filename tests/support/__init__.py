"""Helpers shared by the test suites.  Test modules import helpers from here (or from the lab,
when a bench needs them too), never from another test module (tests/test_layout.py)."""
