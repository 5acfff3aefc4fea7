package main

import "github.com/olmguard/olmguard/pkg/setup"

// reconcilers are every concern of olmguard's controller (pkg/setup lists them).
var reconcilers = setup.Reconcilers()
