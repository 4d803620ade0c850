// Placeholder until the first writer lands.
