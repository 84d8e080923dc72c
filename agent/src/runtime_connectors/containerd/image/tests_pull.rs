//! Pull test (below).
