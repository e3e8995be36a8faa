"""The command line: `hpdparse convert|render|review|serve` (`main`), the options they share
(`options`), the serve and review commands. The top layer: it may import any other."""
