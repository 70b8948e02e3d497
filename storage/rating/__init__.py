"""The rating workflow: the THUMB protocol's rules (`protocol`), annotators, the rating desk
and sessions, the projects' queues, gold items, image flags, and the frames, dashboard and
monitor that read the ratings back."""
