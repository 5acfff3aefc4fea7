package main

import "github.com/olmguard/olmguard/pkg/controller"

// reconcilers are added to the manager in this order. Each concern package
// (pkg/controller/<concern>) exposes a controller.Setup and is listed here.
var reconcilers = []controller.Setup{}
