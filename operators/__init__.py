"""The operators: one package each, same module layout, independent of one another."""
