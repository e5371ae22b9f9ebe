"""User studies: a grid of sessions (instruction levels × repeats × coders × participants) run on
a local pool or a Ray cluster, tracked in the session store and aggregated as the study's table
and Figure 2."""
