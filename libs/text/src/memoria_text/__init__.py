"""Language rules shared by the services and the offline planner, in English and Portuguese:
text folding (:mod:`memoria_text.folding`), the commands recognized before any model call
(:mod:`memoria_text.commands`), relative dates (:mod:`memoria_text.relative_dates`) and the
user-facing copy (:mod:`memoria_text.i18n`). Pure: no I/O, no clock."""
