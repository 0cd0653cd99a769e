"""Review branches and pull requests for plans awaiting approval and for refusals."""
