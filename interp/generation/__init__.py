"""The parts of the generation loop (:mod:`interp.generate`): prompts, sampling, stopping, what hooks see."""
