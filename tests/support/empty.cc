// Keeps dlprof_test_support non-empty.
