// TODO(owner): not written yet.
