"""Reading text: graphemes and line breaks, languages, the analysis chain, units, window ends."""
