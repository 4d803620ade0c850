/* libdlprof.so is dlprof_core linked whole; this file only gives the shared
 * library target a source of its own. */
