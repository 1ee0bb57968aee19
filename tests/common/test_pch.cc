// The source of pvdisk_test_pch (tests/CMakeLists.txt): a target exists to
// build the precompiled test_pch.h that the test programs reuse; it needs a
// source of its own, and this one is empty.
