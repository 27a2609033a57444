-- Redisson 3.20.0 renewal (RedissonBaseLock.renewExpirationAsync), as the 2023 article prints it
-- (the Java string literals joined, one per line). KEYS[1] lock; ARGV[1] lease ms; ARGV[2] owner.
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then 
redis.call('pexpire', KEYS[1], ARGV[1]); 
return 1; 
end; 
return 0;
