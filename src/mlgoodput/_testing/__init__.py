"""Test helpers that ship with the package: fake servers speaking real wire protocols."""
