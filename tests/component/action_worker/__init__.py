"""Tests of the action worker's actions. A package so that the test modules can import their
shared harness relatively (and share basenames with other suites)."""
