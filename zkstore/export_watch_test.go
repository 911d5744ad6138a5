package zkstore

// ClientWatches returns the number of client watches the Store serves:
// those go-zookeeper holds for it and that have not fired.
func ClientWatches(s *Store) int {
	s.watches.mu.Lock()
	defer s.watches.mu.Unlock()
	return s.watches.served
}
