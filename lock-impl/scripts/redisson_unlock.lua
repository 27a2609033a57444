-- Redisson 3.20.0 unlock (RedissonLock.unlockInnerAsync), verbatim as the three-Redis-locks article prints it (the Java
-- string literals joined). KEYS[1] lock; KEYS[2] unlock channel; ARGV[1] message (0);
-- ARGV[2] lease ms; ARGV[3] owner. nil: not the owner; 0: count still > 0; 1: deleted.
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;
