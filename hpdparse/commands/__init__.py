"""The command line: `hpdparse convert|render|review|serve` (`main`), the click options made from
the settings' declarations (`flags`), the options they share (`options`, `render_options`), the
serve and review commands. The top layer: it may import any other."""
