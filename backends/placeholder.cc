// Placeholder until the backends land (delete when real sources exist).
