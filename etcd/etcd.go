// Package etcd adds a control-plane node's stacked etcd member safely: as a learner first,
// promoted once it has caught up, serialized across concurrent joiners by a lock held in
// etcd itself, and idempotent when re-run. It knows nothing of files: the caller writes the
// etcd manifest through Join.WriteManifest, and the connection comes through Conn.
package etcd
