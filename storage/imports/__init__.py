"""Reading users' files into the database: the caption/rating import (`importer`, its rows,
files and quick check), THUMB releases, judgment sets, and the checks of untrusted text and
image files they share."""
