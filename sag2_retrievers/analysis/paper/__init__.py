"""The "paper" profile, as the authors' port applies it: analyzer, diversity, phrase lookups."""
