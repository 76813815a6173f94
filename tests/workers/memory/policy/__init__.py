"""Tests of the MEMORY write policy stages."""
