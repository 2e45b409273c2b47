<?php
// Reproduces: a cache-store lock released by reading the owner and then forgetting the key, in
// two commands: between the get and the forget the lease can expire and another worker acquire,
// and the forget removes that worker's lock.

class ReportLock
{
    public function __construct(private $store, private string $name, private string $owner)
    {
    }

    public function release(): bool
    {
        if ($this->store->get($this->name) === $this->owner) {
            $this->store->forget($this->name); // expect: release-without-owner-check
            return true;
        }
        return false;
    }
}
