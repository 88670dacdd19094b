"""Many solves at once: compare methods, sweep instance grids, the paper's comparison."""
