// Package sdnotify tells systemd how a Grapnel process is doing, through
// coreos/go-systemd's daemon package: READY=1 once it serves, STATUS=
// lines only when what they say changes, WATCHDOG=1 while its main loop
// answers, STOPPING=1 on shutdown. Without NOTIFY_SOCKET every call is a
// no-op and no goroutine runs.
package sdnotify
