//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package main

import "os"

// terminalWidth falls back to $COLUMNS where no ioctl is available.
func terminalWidth(*os.File) int { return widthFromEnv() }
