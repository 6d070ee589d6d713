package countries

// Embedded returns the embedded shapes file (for BenchmarkParse).
func Embedded() []byte { return embedded }
