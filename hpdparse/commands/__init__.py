"""The command line: `hpdparse convert|render|review|serve|eval` (`main`, with convert's and
render's options), the click options made from the settings' declarations (`flags`), the options
the commands share (`options`), the serve, review and eval commands. The top layer: it may import
any other."""
