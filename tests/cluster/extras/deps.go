//go:build tools

// Package extras only pins non-tool dependencies for go.mod; it is never built.
package extras

import (
	// Volcano API types: input for controller-gen (scheduling.volcano.sh/v1beta1 PodGroup, Queue).
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)
