package mq

import (
	"fmt"
	"log/slog"
)

// stompLogger routes go-stomp's own log lines into the service's slog logger
// at debug level (the library reports every closed subscription as INFO,
// which the reconnect loop already logs once as a warning).
type stompLogger struct{ log *slog.Logger }

func (l stompLogger) Debugf(format string, v ...any) {
	l.log.Debug("stomp", "msg", fmt.Sprintf(format, v...))
}
func (l stompLogger) Infof(format string, v ...any) {
	l.log.Debug("stomp", "msg", fmt.Sprintf(format, v...))
}
func (l stompLogger) Warningf(format string, v ...any) {
	l.log.Debug("stomp", "msg", fmt.Sprintf(format, v...))
}
func (l stompLogger) Errorf(format string, v ...any) {
	l.log.Debug("stomp", "msg", fmt.Sprintf(format, v...))
}
func (l stompLogger) Debug(m string)   { l.log.Debug("stomp", "msg", m) }
func (l stompLogger) Info(m string)    { l.log.Debug("stomp", "msg", m) }
func (l stompLogger) Warning(m string) { l.log.Debug("stomp", "msg", m) }
func (l stompLogger) Error(m string)   { l.log.Debug("stomp", "msg", m) }
