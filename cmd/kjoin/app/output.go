package app

import "kjoin.dev/kjoin/operr"

func usage(format string, args ...any) error {
	return operr.Newf(operr.Usage, format, args...).
		WithHint("see kjoin --help")
}
