"""One module per ``interp`` subcommand: its arguments, its pre-flight, and the library call it makes.

Each module has ``register(sub)``, which adds the subcommand's parser (a description, each flag's meaning
and default, one example) and sets ``fn`` to its ``run(args) -> int``. ``run`` checks everything that can be
checked before it loads anything, through :func:`interp.preflight.check_command` (output, device, dtype,
model, data, in that order) and the library's own checks of the command's settings, then calls the library.
The modules import nothing heavy at the top, so that building the parser for ``interp models`` costs nothing.
:data:`interp.cli.COMMANDS` lists them in the order ``interp --help`` shows.
"""
