-- SET NX PX plus a fencing token. KEYS[1] lock; KEYS[2] token counter; ARGV[1] owner;
-- ARGV[2] lease ms. Returns the new token, or nil if the lock is held.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
end
return nil
