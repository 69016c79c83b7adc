"""Studies: experiments built on the public API of interp."""
