"""Learning algorithms; each turns one batch of rollouts into one update of its networks."""
