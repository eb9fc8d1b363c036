// Glibc's `stdout` is a mutable global the C library itself serialises; a
// @preconcurrency import lets Swift 6 read it here, in the one place.
@preconcurrency import Glibc

/// The C library's standard output stream, for `fflush` and `setvbuf`.
nonisolated(unsafe) let standardOutput: UnsafeMutablePointer<FILE> = stdout
