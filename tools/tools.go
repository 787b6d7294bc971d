// Package tools pins developer tools as `tool` directives in tools/go.mod.
package tools
